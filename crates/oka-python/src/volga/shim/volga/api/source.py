"""`@source(Entity)`: a pipeline feature fed by a connector. Oka writes a
mock connector's items at start (with their own event times); any other
connector's data is written from outside."""

import functools
import inspect

from volga.api.entity import validate_decorated_entity
from volga.api.pipeline import create_and_register_pipeline_feature


class Connector:
    """Where a source's records come from."""


class KafkaConnector(Connector):
    def __init__(self, source, topic):
        self.source = source
        self.topic = topic


class MysqlConnector(Connector):
    def __init__(self, source, table):
        self.source = source
        self.table = table


class MockOfflineConnector(Connector):
    def __init__(self, items):
        self.items = list(items)

    @staticmethod
    def with_items(items):
        return MockOfflineConnector(items)


class MockOnlineConnector(Connector):
    def __init__(self, items, period_s=0):
        self.items = list(items)
        self.period_s = period_s
        self.delay_s = period_s

    @staticmethod
    def with_periodic_items(items, period_s=0):
        return MockOnlineConnector(items, period_s=period_s)


class Source:
    @staticmethod
    def get(*args, **kwargs):
        raise NotImplementedError("a source's connection is not opened by Oka")


class KafkaSource(Source):
    def __init__(self, bootstrap_servers=None, username=None, password=None):
        self.bootstrap_servers = bootstrap_servers
        self.username = username
        self.password = password

    @staticmethod
    def get(bootstrap_servers, username, password):
        return KafkaSource(bootstrap_servers, username, password)

    def topic(self, topic):
        return KafkaConnector(self, topic)

    @staticmethod
    def mock_with_delayed_items(items, delay_s):
        return MockOnlineConnector(items, delay_s)


class MysqlSource(Source):
    def __init__(self, host=None, port=None, user=None, password=None, database=None):
        self.host, self.port, self.user, self.password, self.database = host, port, user, password, database

    @staticmethod
    def get(host, port, user, password, database):
        return MysqlSource(host, port, user, password, database)

    def table(self, table_name):
        return MysqlConnector(self, table_name)

    @staticmethod
    def mock_with_items(items):
        return MockOfflineConnector(items)


def source(output):
    """Declares a source feature of entity `output`: the function takes no
    parameters and returns a Connector."""
    validate_decorated_entity(output, "Output", "source decorator")

    def wrapper(func):
        if inspect.signature(func).parameters:
            raise TypeError("source function %s should have no parameters" % func.__name__)
        create_and_register_pipeline_feature(func, func.__name__, [], output, is_source=True)

        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            result = func(*args, **kwargs)
            if not isinstance(result, Connector):
                raise TypeError(
                    "%s must return a Connector, got %s" % (func.__name__, type(result).__name__)
                )
            return result

        return wrapped

    return wrapper
