__version__ = "0.1.0"
# The Reckon server this client is written against: the [Unreleased] section of CHANGELOG.md,
# schema migrations 0001 to 0042, and docs/openapi/api.json of the same commit.
RECKON_VERSION = "unreleased (migrations 0001-0042)"
