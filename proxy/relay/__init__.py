"""The relay: a request read within its limits, routed, its credentials set, its body parsed
once (the prefix cache) or repaired in a worker process (offload), sent upstream and the answer
streamed back (SSE included)."""
