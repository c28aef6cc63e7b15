from django import forms
from django.conf import settings

from .importers import FORMATS
from .ingest import DUPLICATE_POLICIES
from .services import human_size


class ImportOptionsForm(forms.Form):
    """What every import asks: a name, how to treat bad rows and duplicates, the split."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    skip_bad_rows = forms.BooleanField(
        required=False, help_text="Leave bad rows out (they are listed) instead of refusing the whole file."
    )
    duplicates = forms.ChoiceField(choices=DUPLICATE_POLICIES.items(), initial="report")
    eval_fraction = forms.FloatField(
        min_value=0.0, max_value=0.99, initial=0.0, help_text="Share of rows put in the eval split (seeded), e.g. 0.1."
    )
    seed = forms.IntegerField(min_value=0, initial=0)
    prompt_column = forms.CharField(required=False, max_length=100, help_text="Read the prompt from this column (default: prompt).")
    messages_column = forms.CharField(required=False, max_length=100, help_text="Chat messages column (default: messages).")
    answer_column = forms.CharField(required=False, max_length=100, help_text="Reference answer column (default: answer, else label).")
    data_source_column = forms.CharField(required=False, max_length=100, help_text="Data source column (default: data_source).")

    def options(self) -> dict:
        data = self.cleaned_data
        columns = {
            field: data[f"{field}_column"]
            for field in ("prompt", "messages", "answer", "data_source")
            if data.get(f"{field}_column")
        }
        return {
            "skip_bad_rows": data["skip_bad_rows"],
            "eval_fraction": data["eval_fraction"],
            "seed": data["seed"],
            "duplicates": data["duplicates"],
            "columns": columns,
            "description": data.get("description", ""),
        }


class UploadForm(ImportOptionsForm):
    file = forms.FileField(help_text="")
    format = forms.ChoiceField(choices=[("", "Detect from the file name")] + [(k, v) for k, v in FORMATS.items() if k != "hf_dir"], required=False)

    field_order = ["file", "format", "name"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        limit = settings.UPLOAD_MAX_BYTES
        self.fields["file"].help_text = f"JSONL, CSV/TSV or Parquet; at most {human_size(limit)}."
        self.fields["file"].widget.attrs.update({"data-max-bytes": str(limit), "accept": ".jsonl,.ndjson,.json,.csv,.tsv,.parquet,.pq"})


class HfDirForm(ImportOptionsForm):
    path = forms.CharField(max_length=1000, help_text="A directory written by datasets' save_to_disk, under DATASET_ROOTS.")

    field_order = ["path", "name"]


class ArithForm(forms.Form):
    name = forms.CharField(max_length=200, initial="arith")
    n_train = forms.IntegerField(min_value=1, max_value=200_000, initial=2000, label="Train rows")
    n_eval = forms.IntegerField(min_value=0, max_value=100_000, initial=200, label="Eval rows")
    seed = forms.IntegerField(min_value=0, initial=0)


class PreviewForm(forms.Form):
    """The row browser's query: search, split, and how to render the prompt."""

    q = forms.CharField(required=False, max_length=200, label="Search")
    split = forms.ChoiceField(required=False, choices=[("", "All splits"), ("train", "Train"), ("eval", "Eval")])
    data_source = forms.CharField(required=False, max_length=100)
    template = forms.CharField(required=False, max_length=2000, label="Prompt template", initial="{prompt}")
    model = forms.CharField(required=False, max_length=1000, label="Model (for its chat template)")

    def clean_template(self):
        value = self.cleaned_data.get("template") or "{prompt}"
        if "{prompt}" not in value:
            raise forms.ValidationError("The template must contain {prompt}.")
        return value
