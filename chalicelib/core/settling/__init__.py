"""What a name holds, settled: the table pointer read and parsed (pointers), its state machine
(settle: every half-done change rolled forward or back, in one place), a name taken by a create or
a rename (name_claims), and how a table leaves its name: the drop's finish (drops), the trash
records it becomes (trash_records) and the purge of its files (purges). It uses primitives/,
iceberg/, access/ and containers/."""
