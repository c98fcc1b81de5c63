"""The data path at every version: Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch,
the Describe APIs and telemetry, by raw requests and through real clients."""
