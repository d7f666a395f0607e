"""The domain core: catalog operations in domain terms, shared by every protocol face."""
