"""`@pipeline`: a streaming job over sources. Oka declares the feature (its
data comes from outside: ingest, Kafka, or Volga's own Redis) but does not
run the job."""

import functools

from volga.api.entity import validate_decorated_entity
from volga.api.feature import DepArg, Feature, FeatureRepository, validate_dependencies


class PipelineFeature(Feature):
    def __init__(self, func, dep_args, output_type, is_source=False):
        super().__init__(func, dep_args, output_type)
        self.is_source = is_source


def create_and_register_pipeline_feature(func, feature_name, dep_args, output_type, is_source=False):
    validate_decorated_entity(output_type, "Output", feature_name)
    feature = PipelineFeature(func, dep_args, output_type, is_source)
    feature.name = feature_name
    FeatureRepository.register(feature)
    output_type._entity_metadata._pipelines[feature_name] = feature
    return feature


def pipeline(dependencies, output):
    """Declares a pipeline feature computed by a streaming job from
    `dependencies` (sources or pipelines), of entity `output`."""

    def wrapper(func):
        dep_args = [DepArg(d) for d in dependencies]
        validate_dependencies(func.__name__, dep_args)
        create_and_register_pipeline_feature(func, func.__name__, dep_args, output)

        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            return func(*args, **kwargs)

        return wrapped

    return wrapper
