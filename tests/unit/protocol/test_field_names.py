"""A response or request built with a field name its message does not have is refused (in
tests), where it used to be encoded as that field's default."""

from __future__ import annotations

import pytest

from protocol import EncodeError, encode_request, encode_response
from protocol.messages import check_field_names, unknown_field_names

METADATA, PRODUCE = 3, 0


def test_a_misspelt_field_is_refused_at_any_depth() -> None:
    body = {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "h", "port": 1, "rakc": None}],
            "cluster_id": "c", "controller_id": 1, "topics": [], "eror_code": 0}
    assert unknown_field_names(METADATA, False, body) == ["brokers.rakc", "eror_code"]
    check_field_names(True)
    with pytest.raises(EncodeError, match="has no field named brokers.rakc, eror_code"):
        encode_response(METADATA, 12, 1, body)
    with pytest.raises(EncodeError, match="no field named topic_dta"):
        encode_request(PRODUCE, 9, 1, "c", {"acks": 1, "timeout_ms": 1, "topic_dta": []})


def test_a_field_of_another_version_is_no_error() -> None:
    # cluster_authorized_operations exists in v8-10 only: harmless in v12, as the handlers rely on.
    body = {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1, "topics": [],
            "cluster_authorized_operations": 0}
    assert unknown_field_names(METADATA, False, body) == []
    encode_response(METADATA, 12, 1, body)
