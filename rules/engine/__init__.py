"""The engine every rule is built on: records, pipeline, copy-on-write helpers, shared walks."""
