"""Warehouses (one S3 bucket each): create, get, list, update properties, delete."""

from __future__ import annotations

from chalicelib.core.access import data_actions as _data_actions
from chalicelib.core.containers.warehouses import create as create
from chalicelib.core.containers.warehouses import delete as delete
from chalicelib.core.containers.warehouses import get as get
from chalicelib.core.containers.warehouses import list_names as list_names
from chalicelib.core.containers.warehouses import request_metrics as request_metrics
from chalicelib.core.containers.warehouses import require as require
from chalicelib.core.containers.warehouses import set_request_metrics as set_request_metrics
from chalicelib.core.containers.warehouses import update_properties as update_properties

DATA_ACTIONS_PROPERTY = _data_actions.PROPERTY  # re-exported
