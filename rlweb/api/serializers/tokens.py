from rest_framework import serializers


class TokenInfoSerializer(serializers.Serializer):
    exists = serializers.BooleanField(help_text="Whether the user has a token.")
    prefix = serializers.CharField(allow_null=True, help_text="First characters of the key, to recognise it.")
    created = serializers.DateTimeField(allow_null=True)


class NewTokenSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="The new key: send it as `Authorization: Token <key>`. Shown once here.")
    created = serializers.DateTimeField()


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    is_staff = serializers.BooleanField(help_text="Staff see and manage every user's objects.")
