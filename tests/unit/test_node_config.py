from __future__ import annotations

import pytest

from cluster.config import ConfigError, NodeConfig, load_config, secret_bits


def test_defaults_toml_env_and_overrides(tmp_path) -> None:
    assert NodeConfig().socket_request_max_bytes == 104857600
    f = tmp_path / "n.toml"
    f.write_text('node_id = 3\nport = 19999\n"group.min.session.timeout.ms" = 100\n'
                 '[node]\noffsets_topic_num_partitions = 4\n"auto.create.topics.enable" = false\n')
    cfg = load_config(str(f), env={"KCOORD_PORT": "20000", "KCOORD_LOG_RETENTION_BYTES": "5000"},
                      overrides={"log.segment.bytes": "4096"})
    assert (cfg.node_id, cfg.port, cfg.group_min_session_timeout_ms) == (3, 20000, 100)
    assert cfg.offsets_topic_num_partitions == 4 and cfg.auto_create_topics is False
    assert cfg.log_retention_bytes == 5000 and cfg.log_segment_bytes == 4096


@pytest.mark.parametrize(("src", "needle"), [
    ({"port": "abc"}, "port"),
    ({"offsets.topic.num.partitions": 0}, "offsets_topic_num_partitions"),
    ({"group_min_session_timeout_ms": 10, "group_max_session_timeout_ms": 5}, "group_max_session_timeout_ms"),
    ({"socket.request.max.bytes": -1}, "socket_request_max_bytes"),
    ({"no.such.setting": 1}, "no.such.setting"),
    ({"auto_create_topics": "maybe"}, "auto_create_topics"),
    ({"leader.imbalance.check.interval.seconds": 0}, "leader_imbalance_check_interval_seconds"),
    ({"leader.imbalance.per.broker.percentage": 101}, "leader_imbalance_per_broker_percentage"),
])
def test_bad_values_name_the_setting(src, needle) -> None:
    with pytest.raises(ConfigError) as ei:
        load_config(None, env={}, overrides=src)
    assert needle in str(ei.value)


def test_leader_balancing_takes_kafkas_names_and_defaults() -> None:
    cfg = load_config(None, env={})
    assert (cfg.auto_leader_rebalance_enable, cfg.leader_imbalance_check_interval_seconds,
            cfg.leader_imbalance_per_broker_percentage) == (True, 300, 10)
    cfg = load_config(None, env={}, overrides={"auto.leader.rebalance.enable": "false",
                                               "leader.imbalance.check.interval.seconds": "5",
                                               "leader.imbalance.per.broker.percentage": "0"})
    assert (cfg.auto_leader_rebalance_enable, cfg.leader_imbalance_check_interval_seconds,
            cfg.leader_imbalance_per_broker_percentage) == (False, 5, 0)


def test_bad_env_value(tmp_path) -> None:
    with pytest.raises(ConfigError, match="KCOORD_GROUP_MAX_SIZE"):
        load_config(None, env={"KCOORD_GROUP_MAX_SIZE": "lots"})


def test_listeners_kafka_style() -> None:
    cfg = load_config(None, env={}, overrides={
        "listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://:29092",
        "advertised.listeners": "INTERNAL://kcoord-0:9092,EXTERNAL://localhost:9092"})
    assert (cfg.host, cfg.port) == ("0.0.0.0", 9092)  # the first listener is the main one
    assert [(x.name, x.host, x.port) for x in cfg.listener_list()] == [("INTERNAL", "0.0.0.0", 9092),
                                                                       ("EXTERNAL", "", 29092)]
    assert cfg.advertised == "kcoord-0" and cfg.advertised_for("EXTERNAL") == ("localhost", 9092)
    plain = load_config(None, env={}, overrides={"host": "10.0.0.5", "port": 9099, "advertised_host": "a.example"})
    assert [x.name for x in plain.listener_list()] == ["PLAINTEXT"]
    assert plain.advertised_for("PLAINTEXT") == ("a.example", 9099)
    for bad in ({"listeners": "INTERNAL:9092"}, {"listeners": "internal://h:1"},
                {"listeners": "A://h:1,A://h:2"}, {"listeners": "A://h:99999"},
                {"listeners": "A://h:1", "advertised.listeners": "B://x:1"},
                {"listeners": "A://h:1", "advertised.listeners": "A://0.0.0.0:1"},
                {"listeners": "A://h:1", "port": 2}):
        with pytest.raises(ConfigError, match="listeners"):
            load_config(None, env={}, overrides=bad)


PEERS = "127.0.0.1:9092:19092,127.0.0.1:9093:19093,127.0.0.1:9094:19094"


@pytest.mark.parametrize("secret", ["", "secret", "test-cluster-secret", "s" * 64, "0123456789" * 2])
def test_a_cluster_secret_under_128_bits_is_refused_at_start(secret: str) -> None:
    with pytest.raises(ConfigError, match="cluster_secret.*128 bits"):
        load_config(None, env={}, overrides={"peers": PEERS, "cluster_secret": secret})


def test_generated_secrets_pass() -> None:
    import secrets

    for secret in (secrets.token_hex(16), secrets.token_hex(32), secrets.token_urlsafe(32), "test-cluster-secret-5f1c9a7e2b4d80364be1a7c2d9f03e68"):
        assert load_config(None, env={}, overrides={"peers": PEERS, "cluster_secret": secret}).cluster_secret == secret


@pytest.mark.parametrize("secret", ["correct horse battery staple", "CorrectHorseBatteryStaple42",
                                    "Correct-Horse-Battery-Staple-2024!", "correct horse battery staple orange banana",
                                    "test-cluster-secret-5f1c9a7e2b4d8036"])  # the last: 64 random bits
def test_a_passphrase_of_words_does_not_count_as_128_bits(secret: str) -> None:
    """Words count as drawn from a large vocabulary (about 16 bits each), not as their letters."""
    assert secret_bits(secret) < 128
    with pytest.raises(ConfigError, match="cluster_secret.*128 bits"):
        load_config(None, env={}, overrides={"peers": PEERS, "cluster_secret": secret})


def test_an_authorizer_needs_a_first_listener_the_nodes_authenticate_on() -> None:
    """The nodes send each other transaction markers over the first listener, as CLUSTER_ACTION.
    Over PLAINTEXT (or SSL without client certificates) they are ANONYMOUS, so ANONYMOUS would
    need that right, and every client reaching the port could commit or abort any transaction."""
    acls = {"peers": PEERS, "cluster_secret": "k" * 8 + "c0ffee-9e3779b97f4a7c15f39cc0605cedc834",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    tls = {"ssl.keystore.location": "/etc/kcoord/node.pem", "ssl.truststore.location": "/etc/kcoord/ca.pem"}
    with pytest.raises(ConfigError, match="authorizer_class_name.*ANONYMOUS"):
        load_config(None, env={}, overrides=acls)
    with pytest.raises(ConfigError, match="authorizer_class_name"):
        load_config(None, env={}, overrides={**acls, **tls, "listeners": "SSL://127.0.0.1:9092",
                                             "ssl.client.auth": "requested"})
    load_config(None, env={}, overrides={**acls, **tls, "listeners": "SSL://127.0.0.1:9092",
                                         "ssl.client.auth": "required"})
    load_config(None, env={}, overrides={k: v for k, v in acls.items() if k != "peers"})  # one node: no peers' requests
