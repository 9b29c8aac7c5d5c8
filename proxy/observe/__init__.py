"""Observability: the log (one JSON line per event, fields capped, content only where the route
opts in), the Prometheus metrics, the optional OpenTelemetry span and the page's capture of
recent requests. The request's flow and its named events live here (flow.py): the accounting,
the capture and the tracing are its subscribers."""
