"""Refusing an over-size upload while it streams in, instead of after it filled the disk."""

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile


class SizeLimitUploadHandler(FileUploadHandler):
    """Drops any uploaded file over UPLOAD_MAX_BYTES as soon as it gets there (the rest of the
    body is read and discarded) and marks the request, so the view can say why."""

    def __init__(self, request=None):
        super().__init__(request)
        self.limit = settings.UPLOAD_MAX_BYTES
        self.received = 0

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit:
            self.request.upload_too_large = self.file_name or "the file"
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size):
        return None  # the next handlers build the file
