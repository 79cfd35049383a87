"""pdlab.kv_transfer"""
