"""What every API view shares: the error shape, the schema class, authentication,
throttles and the owner-or-staff permission."""

from __future__ import annotations

from rest_framework import generics, viewsets
from rest_framework.parsers import JSONParser
from rest_framework.views import APIView

from rlweb.core.ownership import get_visible_or_404

from ..errors import exception_handler
from ..permissions import OwnerOrStaff
from ..schema import ApiAutoSchema
from ..throttling import UserThrottle


class ApiMixin:
    # DRF views are exempt from LoginRequiredMiddleware (APIView.as_view sets login_required =
    # False): anonymous calls reach DRF and get a 401 in the error shape, never a redirect.
    # JSON bodies only (file uploads opt into multipart): a form-encoded body cannot carry the
    # nested objects of configs and params, and one body format keeps the schema exact.
    parser_classes = [JSONParser]
    permission_classes = [OwnerOrStaff]
    throttle_classes = [UserThrottle]
    schema = ApiAutoSchema()

    def get_exception_handler(self):
        return exception_handler


class ApiView(ApiMixin, APIView):
    pass


class GenericApiView(ApiMixin, generics.GenericAPIView):
    pass


class ApiViewSet(ApiMixin, viewsets.GenericViewSet):
    pass


class RunChildMixin:
    """Views under /runs/{run_id}/: the run must be visible to the caller (else 404)."""

    def get_run(self):
        from rlweb.runs.models import Run

        if not hasattr(self, "_run"):
            self._run = get_visible_or_404(Run, self.request.user, pk=self.kwargs["run_id"])
        return self._run


class UnknownEndpoint(ApiView):
    """Any /api/ URL that matches no endpoint: the JSON 404 of the error shape (after
    authentication, so an anonymous caller still learns nothing but 401)."""

    permission_classes = ApiMixin.permission_classes
    schema = None  # not an endpoint: kept out of the OpenAPI schema

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        from rest_framework.exceptions import NotFound

        raise NotFound("No API endpoint matches this URL.")
