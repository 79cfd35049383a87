"""The naive oracle every kernel and path is checked against (``reference.py``)."""
