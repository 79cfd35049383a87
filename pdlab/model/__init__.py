"""pdlab.model"""
