"""Features as declared by the decorators, by name (Volga's FeatureRepository)."""


class DepArg:
    """A dependency: a feature's name and the storage query read (`latest`)."""

    def __init__(self, feature_name, query_name=None):
        self.feature_name = feature_name
        self.query_name = query_name if query_name is not None else "latest"

    def get_name(self):
        return self.feature_name

    def __repr__(self):
        return "DepArg(%r, %r)" % (self.feature_name, self.query_name)


class Feature:
    def __init__(self, func, dep_args, output_type):
        self.func = func
        self.name = func.__name__
        self.dep_args = list(dep_args)
        self.output_type = output_type


class FeatureRepository:
    """Every feature declared so far, by name; a name is declared once."""

    _features = {}

    @classmethod
    def register(cls, feature):
        if feature.name in cls._features:
            raise ValueError("feature %s is already declared" % feature.name)
        cls._features[feature.name] = feature

    @classmethod
    def get_feature(cls, name):
        return cls._features.get(name)

    @classmethod
    def get_all_features(cls):
        return dict(cls._features)

    @classmethod
    def clear(cls):
        cls._features.clear()


def validate_dependencies(feature_name, dep_args):
    for dep in dep_args:
        if FeatureRepository.get_feature(dep.get_name()) is None:
            raise ValueError(
                "dependency %s of feature %s is not declared (declare it above this function)"
                % (dep.get_name(), feature_name)
            )
