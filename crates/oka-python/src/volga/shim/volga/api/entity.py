"""`@entity` classes and `field(key=..., timestamp=...)`, as in Volga: an
entity's instances take their fields as keyword arguments; key and
timestamp fields are required, other fields default to None or their
class default."""

import datetime


class Field:
    def __init__(self, key=False, timestamp=False):
        self.name = None
        self.dtype = None
        self.key = key
        self.timestamp = timestamp

    def __repr__(self):
        return "Field(%s)" % self.name


class EntityMetadata:
    def __init__(self, cls, fields):
        self.name = cls.__name__
        self.fields = fields
        self.original_cls = cls
        names = set()
        for f in fields:
            if f.name in names:
                raise ValueError("duplicate field %s in entity %s" % (f.name, self.name))
            names.add(f.name)
        stamps = [f for f in fields if f.timestamp]
        if not stamps:
            stamps = [f for f in fields if f.dtype in (datetime.datetime, "datetime")]
            for f in stamps:
                f.timestamp = True
        if len(stamps) != 1:
            raise ValueError(
                "entity %s needs exactly one timestamp field (field(timestamp=True) or one datetime field); it has %d"
                % (self.name, len(stamps))
            )
        self.timestamp_field = stamps[0].name
        self.key_fields = [f.name for f in fields if f.key]
        self._pipelines = {}
        self._on_demands = {}

    def __repr__(self):
        return self.name


def field(key=False, timestamp=False):
    """A field's role in its entity: a key, or the timestamp."""
    return Field(key=key, timestamp=timestamp)


def entity(*args, **kwargs):
    """Declares an entity class (its annotated fields are its schema)."""

    def wrap(cls):
        for name, value in cls.__dict__.items():
            if callable(value) and not name.startswith("__"):
                raise TypeError("entity %s cannot have methods (found %s)" % (cls.__name__, name))
        annotations = dict(getattr(cls, "__annotations__", {}))
        fields = []
        for name, dtype in annotations.items():
            value = getattr(cls, name, None)
            f = value if isinstance(value, Field) else Field()
            f.name = name
            f.dtype = dtype
            fields.append(f)

        def __init__(self, **values):
            for f in fields:
                default = getattr(cls, f.name, None)
                setattr(self, f.name, None if isinstance(default, Field) else default)
            for k, v in values.items():
                if k not in annotations:
                    raise TypeError("%s.__init__ got unexpected argument '%s'" % (cls.__name__, k))
                setattr(self, k, v)
            missing = [
                f.name
                for f in fields
                if getattr(self, f.name) is None and isinstance(getattr(cls, f.name, None), Field)
            ]
            if missing:
                raise TypeError("%s.__init__ missing required arguments: %s" % (cls.__name__, ", ".join(missing)))

        def __repr__(self):
            return "%s(%s)" % (cls.__name__, ", ".join("%s=%r" % (f.name, getattr(self, f.name)) for f in fields))

        def __eq__(self, other):
            return type(other) is type(self) and all(getattr(self, f.name) == getattr(other, f.name) for f in fields)

        cls.__init__ = __init__
        cls.__repr__ = __repr__
        cls.__eq__ = __eq__
        cls.__hash__ = None
        metadata = EntityMetadata(cls, fields)
        cls._entity_metadata = metadata
        cls._entity = metadata
        return cls

    if len(args) == 1 and not kwargs and callable(args[0]):
        return wrap(args[0])
    return wrap


def validate_decorated_entity(type_annotation, param_name, feature_name):
    if not hasattr(type_annotation, "_entity_metadata"):
        raise TypeError("%s type of %s must be decorated with @entity" % (param_name, feature_name))


def is_entity_type(type_hint):
    if hasattr(type_hint, "_entity_metadata"):
        return True
    if getattr(type_hint, "__origin__", None) is list:
        return any(hasattr(a, "_entity_metadata") for a in getattr(type_hint, "__args__", ()))
    return False


class Entity:
    """A pipeline's handle on an entity's stream (used by `@pipeline`
    functions, which Oka does not run)."""

    def __init__(self, entity_cls):
        validate_decorated_entity(entity_cls, "entity_cls", "Entity")
        self.metadata = entity_cls._entity_metadata
        self.entity_cls = entity_cls


def create_entity(entity_cls):
    return Entity(entity_cls)
