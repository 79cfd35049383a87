"""pdlab.sched"""
