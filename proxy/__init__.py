"""chatmend's server: configuration, HTTP proxying, streaming relay and logging."""
