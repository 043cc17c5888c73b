"""POP consumption: the broker picks messages, they turn invisible, acks or revive.

api.py holds the records both front doors (remoting POP codes, gRPC
ReceiveMessage/Ack/ChangeInvisibleDuration) exchange with the pop service.
"""
