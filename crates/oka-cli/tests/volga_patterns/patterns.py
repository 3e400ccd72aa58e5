"""The seven UDF patterns of docs/migrating-from-volga.md, written as a module
for Volga's on-demand layer (Volga's own declarations, unchanged): served by
`oka serve --volga-module` in crates/oka-cli/tests/volga_module.rs and compared
with their CEL versions (patterns.yaml)."""

from datetime import datetime, timedelta, timezone
from typing import List

from volga.api.entity import Entity, entity, field
from volga.api.on_demand import on_demand
from volga.api.pipeline import pipeline
from volga.api.source import Connector, KafkaSource, MockOnlineConnector, source


@entity
class TestEntity:
    id: str = field(key=True)
    value: float
    timestamp: datetime = field(timestamp=True)


@entity
class DependentEntity:
    id: str = field(key=True)
    computed_value: float
    num_entities: int
    timestamp: datetime = field(timestamp=True)


@entity
class User:
    user_id: str = field(key=True)
    name: str
    timestamp: datetime = field(timestamp=True)


@entity
class UserOrderInfo:
    user_id: str = field(key=True)
    product_id: str = field(key=True)
    product_name: str
    user_name: str
    timestamp: datetime = field(timestamp=True)


@entity
class UserOrderStats:
    user_id: str = field(key=True)
    order_name: str
    timestamp: datetime = field(timestamp=True)


@entity
class OnSaleUserSpentInfo:
    user_id: str = field(key=True)
    avg_spent_7d: float
    num_purchases_1h: int
    timestamp: datetime = field(timestamp=True)


@entity
class UserStats:
    user_id: str = field(key=True)
    total_spent: float
    purchase_count: int
    timestamp: datetime = field(timestamp=True)


@entity
class Order:
    buyer_id: str = field(key=True)
    product_id: str
    product_type: str
    product_price: float
    purchased_at: datetime = field(timestamp=True)


@entity
class OrderStats:
    buyer_id: str = field(key=True)
    avg_spent_7d: float
    num_purchases_1h: int
    total_spent: float
    timestamp: datetime = field(timestamp=True)


KAFKA = KafkaSource.get(bootstrap_servers="kafka:9092", username="", password="")


# Pattern 1: arithmetic with an argument (the seed workload).
@source(TestEntity)
def test_feature() -> Connector:
    return KAFKA.topic("test")


@on_demand(dependencies=['test_feature'])
def simple_feature(dep: TestEntity, multiplier: float = 1.0) -> TestEntity:
    return TestEntity(id=dep.id, value=dep.value * multiplier, timestamp=datetime.now())


# Pattern 2: another output entity, a chain, and a range read.
@source(TestEntity)
def pipeline_feature() -> Connector:
    return KAFKA.topic("pipeline")


@on_demand(dependencies=['pipeline_feature'])
def dependent_feature(dep: TestEntity, multiplier: float = 1.0) -> DependentEntity:
    return DependentEntity(id=dep.id, computed_value=dep.value * multiplier,
                           num_entities=1, timestamp=datetime.now())


@on_demand(dependencies=['dependent_feature'])
def chained_feature(dep: DependentEntity, offset: float = 0.0) -> DependentEntity:
    return DependentEntity(id=dep.id, computed_value=dep.computed_value + offset,
                           num_entities=1, timestamp=datetime.now())


@on_demand(dependencies=[('pipeline_feature', 'range')])
def list_feature(entities: List[TestEntity]) -> DependentEntity:
    if not entities:
        return DependentEntity(id='default', computed_value=0.0, num_entities=0, timestamp=datetime.now())
    return DependentEntity(id=entities[0].id, computed_value=sum(e.value for e in entities),
                           num_entities=len(entities), timestamp=datetime.now())


# Pattern 3: several on-demand dependencies, a diamond.
@source(TestEntity)
def base_feature1() -> Connector:
    return KAFKA.topic("base1")


@source(TestEntity)
def base_feature2() -> Connector:
    return KAFKA.topic("base2")


@on_demand(dependencies=['base_feature1'])
def level1_feature1(dep: TestEntity) -> DependentEntity:
    return DependentEntity(id=dep.id, computed_value=dep.value, num_entities=1, timestamp=datetime.now())


@on_demand(dependencies=['base_feature2'])
def level1_feature2(dep: TestEntity) -> DependentEntity:
    return DependentEntity(id=dep.id, computed_value=dep.value, num_entities=1, timestamp=datetime.now())


@on_demand(dependencies=['level1_feature1', 'level1_feature2'])
def level2_feature(dep1: DependentEntity, dep2: DependentEntity) -> DependentEntity:
    return DependentEntity(id=dep1.id, computed_value=dep1.computed_value + dep2.computed_value,
                           num_entities=2, timestamp=datetime.now())


@on_demand(dependencies=['level2_feature'])
def level3_feature(dep: DependentEntity) -> DependentEntity:
    return DependentEntity(id=dep.id, computed_value=dep.computed_value, num_entities=2,
                           timestamp=datetime.now())


# Pattern 4: two pipeline features of different entities, a compound key.
@source(User)
def user_source() -> Connector:
    return MockOnlineConnector.with_periodic_items(
        [User(user_id='123', name='John', timestamp=datetime(2026, 3, 1, 9, 0))], period_s=0)


@pipeline(dependencies=['user_source'], output=UserOrderInfo)
def user_order_pipeline(users: Entity):
    return users


@on_demand(dependencies=['user_order_pipeline', 'user_source'])
def user_order_stats(orders: UserOrderInfo, user: User) -> UserOrderStats:
    return UserOrderStats(user_id=user.user_id, order_name=orders.product_name, timestamp=user.timestamp)


# Pattern 5: arithmetic across fields, the input's timestamp kept.
@source(OnSaleUserSpentInfo)
def user_spent_pipeline() -> Connector:
    return KAFKA.topic("spent")


@on_demand(dependencies=[('user_spent_pipeline', 'latest')])
def user_stats(spent_info: OnSaleUserSpentInfo) -> UserStats:
    return UserStats(user_id=spent_info.user_id, timestamp=spent_info.timestamp,
                     total_spent=spent_info.avg_spent_7d * spent_info.num_purchases_1h,
                     purchase_count=spent_info.num_purchases_1h)


# Pattern 6 needs no code: the pipeline feature is targeted directly.

# Pattern 7: windows of the pipeline, at request time.
@source(Order)
def orders() -> Connector:
    return KAFKA.topic("orders")


@on_demand(dependencies=[('orders', 'range')])
def order_stats(window: List[Order]) -> OrderStats:
    on_sale = [o for o in window if o.product_type == 'ON_SALE']
    hour_ago = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(hours=1)
    avg = sum(o.product_price for o in on_sale) / len(on_sale) if on_sale else 0.0
    recent = len([o for o in on_sale if o.purchased_at >= hour_ago])
    return OrderStats(buyer_id=window[0].buyer_id if window else '', avg_spent_7d=avg,
                      num_purchases_1h=recent, total_spent=avg * recent if on_sale else 0.0,
                      timestamp=datetime.now())
