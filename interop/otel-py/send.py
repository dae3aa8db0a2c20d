"""Sends one span, one log record and one counter through the OpenTelemetry
Python SDK's own OTLP exporters, for the agent's OTLP test
(internal/agent/collect TestOTelSDK).

    send.py http|grpc ENDPOINT MARKER [TOKEN]

http: OTLP/HTTP protobuf, gzip, to ENDPOINT/v1/{traces,logs,metrics};
grpc: OTLP/gRPC (plaintext, gzip) to ENDPOINT (host:port). Every item
carries MARKER so the test can tell this run's from others. Exits 1 if a
flush fails: the exporters answer the test's question only through what
arrives, but a refused export should not pass silently.
"""
import logging
import sys

from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def exporters(proto, endpoint, headers):
    if proto == "http":
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        kw = dict(headers=headers, compression=Compression.Gzip, timeout=10)
        return (OTLPSpanExporter(endpoint=endpoint + "/v1/traces", **kw),
                OTLPLogExporter(endpoint=endpoint + "/v1/logs", **kw),
                OTLPMetricExporter(endpoint=endpoint + "/v1/metrics", **kw))
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    kw = dict(endpoint=endpoint, insecure=True, headers=headers, compression=grpc.Compression.Gzip, timeout=10)
    return OTLPSpanExporter(**kw), OTLPLogExporter(**kw), OTLPMetricExporter(**kw)


def main():
    proto, endpoint, marker = sys.argv[1:4]
    headers = {"authorization": "Bearer " + sys.argv[4]} if len(sys.argv) > 4 else None
    span_exp, log_exp, metric_exp = exporters(proto, endpoint, headers)
    resource = Resource.create({"service.name": "sluice-otel-test", "sluice.marker": marker})

    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exp))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exp))
    reader = PeriodicExportingMetricReader(metric_exp, export_interval_millis=3_600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    log = logging.getLogger("sluice.otel.test")
    log.propagate = False
    log.addHandler(LoggingHandler(logger_provider=logger_provider))
    log.setLevel(logging.INFO)

    tracer = tracer_provider.get_tracer("sluice.otel.test")
    with tracer.start_as_current_span("checkout", attributes={
            "sluice.marker": marker, "order.items": 3, "order.total": 12.5, "order.paid": True}):
        log.warning("order placed %s", marker, extra={"sluice.marker": marker, "order.items": 3})
    counter = meter_provider.get_meter("sluice.otel.test").create_counter("orders", unit="1")
    counter.add(3, {"sluice.marker": marker, "route": "/checkout"})

    ok = meter_provider.force_flush(10_000) and tracer_provider.force_flush(10_000) and logger_provider.force_flush(10_000)
    meter_provider.shutdown()
    tracer_provider.shutdown()
    logger_provider.shutdown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
