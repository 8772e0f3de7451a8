"""Prometheus metrics for `/metrics`: one registry per gateway (tests run several in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Added latency is a few milliseconds on a quiet call and up to seconds when a summary is written.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The gateway's counters. `outcome` of a request: prepared (worksurface's view was sent),
    passthrough (server-side state: sent untouched), unparsed (not readable: sent unchanged),
    failed_open (worksurface failed: the original was sent), local (answered by the gateway)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("worksurface_gateway_requests", "Requests by API and outcome.",
                                ["api", "outcome"], registry=r)
        self.upstream_status = Counter("worksurface_gateway_upstream_responses", "Upstream answers by status.",
                                       ["api", "status"], registry=r)
        self.tokens_in = Counter("worksurface_gateway_tokens_in", "Tokens of the transcripts clients sent "
                                 "(worksurface's count).", ["api"], registry=r)
        self.tokens_forwarded = Counter("worksurface_gateway_tokens_forwarded", "Tokens of the views "
                                        "forwarded (worksurface's count).", ["api"], registry=r)
        self.stage_firings = Counter("worksurface_gateway_stage_firings", "Calls on which a stage edited "
                                     "the view.", ["stage"], registry=r)
        self.upstream_input = Counter("worksurface_gateway_upstream_input_tokens", "Input tokens the "
                                      "upstream reported (cached ones included).", ["api"], registry=r)
        self.upstream_cached = Counter("worksurface_gateway_upstream_cached_tokens", "Input tokens the "
                                       "upstream reported as read from its prompt cache.", ["api"], registry=r)
        self.cache_share = Gauge("worksurface_gateway_cache_share", "Cached share of the input tokens the "
                                 "upstream reported, over every call so far.", ["api"], registry=r)
        self.added_latency = Histogram("worksurface_gateway_added_latency_seconds", "Time from a request's "
                                       "arrival to its forwarding (what the gateway adds).", ["api"],
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.sessions_open = Gauge("worksurface_gateway_sessions_open", "Sessions open in memory.", registry=r)
        self._input: dict[str, float] = {}
        self._cached: dict[str, float] = {}

    def usage(self, api: str, input_tokens: int, cached_tokens: int) -> None:
        """Record what the upstream reported for one call."""
        self.upstream_input.labels(api).inc(input_tokens)
        self.upstream_cached.labels(api).inc(cached_tokens)
        self._input[api] = self._input.get(api, 0.0) + input_tokens
        self._cached[api] = self._cached.get(api, 0.0) + cached_tokens
        if self._input[api]:
            self.cache_share.labels(api).set(self._cached[api] / self._input[api])

    def render(self) -> bytes:
        return generate_latest(self.registry)
