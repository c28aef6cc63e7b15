# The API has no models of its own: tokens come from rest_framework.authtoken.
