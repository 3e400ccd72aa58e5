"""`@on_demand(dependencies=[name | (name, query)])`: a feature computed at
request time from its dependencies' records (entity instances: `T`, or
`List[T]` for a `range`), with keyword arguments that have defaults."""

import functools
import inspect
import typing

from volga.api.entity import validate_decorated_entity
from volga.api.feature import DepArg, Feature, FeatureRepository, validate_dependencies


class OnDemandFeature(Feature):
    def __init__(self, func, dep_args, output_type):
        super().__init__(func, dep_args, output_type)
        self.query_names = {d.get_name(): d.query_name for d in dep_args}
        hints = typing.get_type_hints(func)
        self.udf_args_names = [
            name
            for i, (name, p) in enumerate(inspect.signature(func).parameters.items())
            if i >= len(dep_args) and p.default is not p.empty
        ]
        self.hints = hints

    def execute(self, dep_values, udf_args=None):
        udf_args = udf_args or {}
        unknown = set(udf_args) - set(self.udf_args_names)
        if unknown:
            raise ValueError("Invalid UDF arguments for feature %s: %s" % (self.name, unknown))
        return self.func(*dep_values, **udf_args)


def on_demand(dependencies):
    """Declares an on-demand feature of the function's return type."""

    def wrapper(func):
        name = func.__name__
        dep_args = [DepArg(d[0], d[1]) if isinstance(d, tuple) else DepArg(d) for d in dependencies]
        validate_dependencies(name, dep_args)
        hints = typing.get_type_hints(func)
        params = list(inspect.signature(func).parameters.values())
        if len(params) < len(dep_args):
            raise TypeError("%s takes %d parameters for %d dependencies" % (name, len(params), len(dep_args)))
        for p, dep in zip(params, dep_args):
            if p.name not in hints:
                raise TypeError("parameter %s of on_demand function %s needs a type annotation" % (p.name, name))
            hint = hints[p.name]
            is_list = typing.get_origin(hint) is list
            entity_type = typing.get_args(hint)[0] if is_list else hint
            validate_decorated_entity(entity_type, "Parameter %s" % p.name, name)
            expected = FeatureRepository.get_feature(dep.get_name()).output_type
            if entity_type is not expected:
                raise TypeError(
                    "parameter %s type %s does not match dependency %s output type %s"
                    % (p.name, entity_type.__name__, dep.get_name(), expected.__name__)
                )
        if "return" not in hints:
            raise TypeError("on_demand function %s needs a return type annotation" % name)
        output = hints["return"]
        validate_decorated_entity(output, "Return", name)
        feature = OnDemandFeature(func, dep_args, output)
        FeatureRepository.register(feature)
        output._entity_metadata._on_demands[name] = feature

        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            return feature.execute(args, kwargs)

        return wrapped

    return wrapper
