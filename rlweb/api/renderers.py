"""Renderers for the non-JSON answers: a run's config as YAML, exports, checkpoint files.
The views build those bodies themselves; these renderers only let content negotiation accept
the media types (errors are always JSON, see errors.exception_handler)."""

from rest_framework.renderers import BaseRenderer


class PassthroughRenderer(BaseRenderer):
    format = None
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, bytes):
            return data
        return str(data).encode("utf-8") if data is not None else b""


class YAMLRenderer(PassthroughRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"


class NDJSONRenderer(PassthroughRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class CSVRenderer(PassthroughRenderer):
    media_type = "text/csv"
    format = "csv"


class TarRenderer(PassthroughRenderer):
    media_type = "application/x-tar"
    format = "tar"


class OctetStreamRenderer(PassthroughRenderer):
    media_type = "application/octet-stream"
    format = "bin"
