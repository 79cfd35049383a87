"""pdlab.attention"""
