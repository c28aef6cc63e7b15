from rest_framework import serializers

from rlweb.datasets.models import Dataset, DatasetRow


class DatasetSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = Dataset
        fields = [
            "id", "name", "description", "owner", "source", "source_name", "status", "row_count", "train_count",
            "eval_count", "progress_done", "progress_total", "field_summary", "import_report", "created_at", "updated_at",
        ]
        read_only_fields = fields


class DatasetRowSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetRow
        fields = ["index", "split", "prompt", "messages", "answer", "data_source", "extra"]
