"""Who reaches table data, and how: data_access (a signed request checked against the table's grant;
the control plane's bucket policy), data_actions (which actions govern data in a warehouse), signer
and vending (remote signing; STS credentials for a table's prefix), locations (client-chosen table
locations, never nested) and resource_policies (table bucket and table policies, stored). They use
the core's primitives; the routes reach them through the catalog facade, the authorizer directly."""
