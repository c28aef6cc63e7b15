"""Per-object permissions identical to the pages: the owner or staff, and 404 for anyone else.

Views fetch objects through `visible_to(user)` (rlweb.core.ownership), so another user's object
is simply not found; this permission is the second lock on the same door, for any view that
fetches an object some other way."""

from rest_framework import exceptions, permissions


class OwnerOrStaff(permissions.IsAuthenticated):
    def has_object_permission(self, request, view, obj):
        owned = getattr(obj, "is_visible_to", None)
        if owned is None or not owned(request.user):
            # 404, not 403: ids must not reveal which objects exist.
            raise exceptions.NotFound()
        return True
