"""pdlab.ui"""
