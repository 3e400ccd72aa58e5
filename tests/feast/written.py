"""Checks, through Feast's own SDK, what `POST /v1/ingest` wrote through
`oka serve --feast-repo` into Feast's Redis layout (tests/feast/run.sh):

    python written.py REPO_DIR

Expected: driver 1001's driver_stats are the newer record Oka wrote; driver 1002
keeps what `feast materialize` wrote (Oka's record for it was older, and Feast's
rule skips a record not newer than the stored one); the new driver 5005 and the
(5005, "c-9") pair exist with the values written, nulls included.
"""

import sys
import warnings
from datetime import datetime, timezone

warnings.filterwarnings("ignore")

from feast import FeatureStore  # noqa: E402


def main() -> int:
    fs = FeatureStore(repo_path=sys.argv[1])
    stats = fs.get_online_features(
        features=[
            "driver_stats:conv_rate",
            "driver_stats:acc_rate",
            "driver_stats:avg_daily_trips",
            "driver_stats:rating",
            "driver_stats:active",
        ],
        entity_rows=[{"driver_id": 1001}, {"driver_id": 1002}, {"driver_id": 5005}],
    ).to_dict()
    want = {
        "conv_rate": [0.75, 0.25, None],
        "acc_rate": [0.5, 0.123456789012345, 0.0625],
        "avg_daily_trips": [2**53 + 1, -(2**62), 7],
        "rating": [-2147483648, -3, 1],
        "active": [False, False, True],
    }
    for name, values in want.items():
        if stats[name] != values:
            print(f"FAIL driver_stats:{name}: Feast reads {stats[name]}, want {values}")
            return 1
    profile = fs.get_online_features(
        features=["driver_profile:avatar", "driver_profile:signed_up", "driver_lists:logins"],
        entity_rows=[{"driver_id": 5005}],
    ).to_dict()
    signed_up = datetime(2021, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    if profile["avatar"] != [b"\x00\xffok"] or profile["signed_up"] != [signed_up]:
        print(f"FAIL driver_profile: {profile}")
        return 1
    if profile["logins"] != [[signed_up, None]]:
        print(f"FAIL driver_lists:logins: {profile['logins']}")
        return 1
    pair = fs.get_online_features(
        features=["driver_customer_trips:trips_together", "driver_customer_trips:last_rating"],
        entity_rows=[{"driver_id": 5005, "customer_id": "c-9"}],
    ).to_dict()
    if pair["trips_together"] != [12] or pair["last_rating"] != [2.5]:
        print(f"FAIL driver_customer_trips: {pair}")
        return 1
    print("feast-written: what Oka wrote reads back through Feast's SDK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
