"""common"""
