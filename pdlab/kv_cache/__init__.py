"""pdlab.kv_cache"""
