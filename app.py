"""All-in-one Chalice app: every route group of the catalog in one function."""

from chalice import Chalice

from chalicelib.auth.plugin import install
from chalicelib.pipeline import PIPELINE
from chalicelib.routes import auth, config, namespaces, tables, transactions, warehouses

install(PIPELINE)
app = Chalice(app_name="s3-iceberg-catalog")
app.register_blueprint(config.bp)
app.register_blueprint(auth.bp)
app.register_blueprint(warehouses.bp)
app.register_blueprint(namespaces.bp)
app.register_blueprint(tables.bp)
app.register_blueprint(transactions.bp)
