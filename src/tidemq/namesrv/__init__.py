"""The name server: a route registry brokers register with and clients ask for routes."""

from .app import NameServer
from .handlers import NamesrvHandlers
from .routes import BrokerRecord, RegisterResult, RouteTable

__all__ = ["BrokerRecord", "NameServer", "NamesrvHandlers", "RegisterResult", "RouteTable"]
