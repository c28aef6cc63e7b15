// Upload form: refuse an over-size file before sending it, and show the upload's progress.
// Without JavaScript the form posts normally and the server gives the same size error.
(function () {
  function human(bytes) {
    var units = ["bytes", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (bytes >= 1024 && i < units.length - 1) { bytes /= 1024; i++; }
    return (i ? bytes.toFixed(1) : bytes) + " " + units[i];
  }
  document.querySelectorAll("form[data-upload-form]").forEach(function (form) {
    var input = form.querySelector("input[type=file]");
    var sizeError = form.querySelector("[data-size-error]");
    var box = form.querySelector("[data-upload-progress]");
    function tooLarge() {
      var limit = Number(input.dataset.maxBytes);
      var file = input.files && input.files[0];
      if (!file || !limit || file.size <= limit) { sizeError.hidden = true; return false; }
      sizeError.textContent = file.name + " is " + human(file.size) + ", larger than the upload limit of " + human(limit) + ".";
      sizeError.hidden = false;
      return true;
    }
    input.addEventListener("change", tooLarge);
    form.addEventListener("submit", function (event) {
      if (tooLarge()) { event.preventDefault(); return; }
      if (!window.XMLHttpRequest || !window.FormData) return;
      event.preventDefault();
      var xhr = new XMLHttpRequest();
      var bar = box.querySelector(".progress > span");
      box.hidden = false;
      form.querySelector("button[type=submit]").disabled = true;
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) bar.style.width = Math.round(100 * e.loaded / e.total) + "%";
      });
      xhr.addEventListener("load", function () {
        if (xhr.status < 400 && xhr.responseURL) { window.location.assign(xhr.responseURL); return; }
        document.open(); document.write(xhr.responseText); document.close();
      });
      xhr.addEventListener("error", function () {
        box.hidden = true;
        sizeError.textContent = "The upload failed (connection lost). Try again.";
        sizeError.hidden = false;
        form.querySelector("button[type=submit]").disabled = false;
      });
      xhr.open("POST", form.action);
      xhr.send(new FormData(form));
    });
  });
})();
