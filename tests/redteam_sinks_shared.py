"""What tests/fast/test_redteam_sinks.py and tests/s3/test_redteam_sinks.py both use."""

from __future__ import annotations

ACCOUNT = "123456789012"


# Hosts inside the network in the spellings a resolver reads (class named in the refusal).
INSIDE = [
    ("169.254.169.254", "metadata-service"),
    ("169.254.170.2", "metadata-service"),  # ECS credentials
    ("100.100.100.200", "metadata-service"),  # Alibaba
    ("192.0.0.192", "metadata-service"),  # Oracle
    ("[fd00:ec2::254]", "metadata-service"),
    ("2852039166", "metadata-service"),  # 169.254.169.254 as one decimal number
    ("0xa9fea9fe", "metadata-service"),
    ("0xa9.0xfe.0xa9.0xfe", "metadata-service"),
    ("0251.0376.0251.0376", "metadata-service"),  # octal parts
    ("169.254.43518", "metadata-service"),  # inet_aton's a.b.c form
    ("169.254.169.254.", "metadata-service"),  # the root domain's dot
    ("[::ffff:169.254.169.254]", "metadata-service"),
    ("[::ffff:a9fe:a9fe]", "metadata-service"),
    ("[64:ff9b::a9fe:a9fe]", "metadata-service"),  # NAT64
    ("metadata.google.internal", "metadata-service"),
    ("instance-data", "metadata-service"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("[fc00::1]", "private"),
    ("[::ffff:10.0.0.1]", "private"),
    ("100.64.0.1", "shared"),
    ("169.254.1.1", "link-local"),
    ("[fe80::1]", "link-local"),
    ("0.0.0.0", "unspecified"),
    ("0", "unspecified"),
    ("[::]", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("[ff02::1]", "multicast"),
    ("240.0.0.1", "reserved"),
    ("[2002:a9fe:a9fe::]", "6to4"),
]


# This machine: refused too, except on a local run (the catalog on an S3 emulator).
LOOPBACK = ["127.0.0.1", "127.1", "0x7f.1", "2130706433", "0177.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "localhost"]


def _targets(host: str) -> list[tuple[str, str]]:
    return [("webhook", f"https://{host}/latest/meta-data/"), ("sqs", f"https://{host}/{ACCOUNT}/q")]
