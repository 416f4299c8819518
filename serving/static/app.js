"use strict";

// Everything is rendered with textContent / DOM nodes, never innerHTML, so words
// coming back from the model cannot inject markup.
(function () {
  const form = document.getElementById("form");
  const article = document.getElementById("article");
  const button = document.getElementById("generate");
  const status = document.getElementById("status");
  const result = document.getElementById("result");
  const headline = document.getElementById("headline");
  const meta = document.getElementById("meta");
  const table = document.getElementById("heatmap");
  const modelInfo = document.getElementById("model-info");
  const check = document.getElementById("check");
  const maxWords = document.getElementById("max-words");
  const maxWordsValue = document.getElementById("max-words-value");

  // A light-to-dark blue ramp; readable on white and in greyscale.
  const LOW = [239, 246, 255];
  const HIGH = [8, 48, 107];

  function colour(t) {
    const c = LOW.map((lo, i) => Math.round(lo + (HIGH[i] - lo) * t));
    return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
  }

  function setStatus(text, isError) {
    status.textContent = text;
    status.classList.toggle("error", Boolean(isError));
  }

  function trimPadding(tokens) {
    let n = tokens.length;
    while (n > 0 && tokens[n - 1] === "") n--;
    return tokens.slice(0, n);
  }

  // The labels are the words as the reader sees them (the document's words as
  // written, the readable headline's), where the model gives them; the
  // tokens' padding decides how many there are.
  function labels(tokens, words) {
    const n = trimPadding(tokens).length;
    return (words.length ? words : tokens).slice(0, n);
  }

  function renderHeatmap(sourceTokens, headlineTokens, sourceWords, headlineWords,
                         attention) {
    const src = labels(sourceTokens, sourceWords);
    const hyp = labels(headlineTokens, headlineWords);
    const thead = table.tHead;
    const tbody = table.tBodies[0];
    thead.replaceChildren();
    tbody.replaceChildren();

    const headRow = document.createElement("tr");
    const corner = document.createElement("th");
    corner.scope = "col";
    corner.className = "corner";
    corner.textContent = "headline \u2193 / source \u2192";
    headRow.appendChild(corner);
    src.forEach((word) => {
      const th = document.createElement("th");
      th.scope = "col";
      th.className = "src";
      const span = document.createElement("span");
      span.textContent = word;
      th.appendChild(span);
      headRow.appendChild(th);
    });
    thead.appendChild(headRow);

    hyp.forEach((word, t) => {
      const row = attention[t] || [];
      const weights = src.map((_, s) => Number(row[s]) || 0);
      const max = Math.max(...weights, 1e-9);
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      th.scope = "row";
      th.className = "hyp";
      th.textContent = word;
      tr.appendChild(th);
      weights.forEach((w, s) => {
        const td = document.createElement("td");
        const scaled = w / max;
        td.className = "cell";
        td.style.backgroundColor = colour(scaled);
        const label = `${word} \u2192 ${src[s]}: ${w.toFixed(3)}`;
        td.title = label;
        td.setAttribute("aria-label", label);
        td.dataset.weight = w.toFixed(4);
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
  }

  // The slider's last position sends no `max_length`: the model's default.
  function maxLength() {
    const value = Number(maxWords.value);
    return value < Number(maxWords.max) ? value : null;
  }

  function showMaxWords() {
    const value = maxLength();
    maxWordsValue.textContent = value === null ? "model default" : `${value} words`;
  }

  // The model's comparison with the lead baseline on validation (the
  // export's training.json): shown when the model does not beat it.
  function showCheck(record) {
    const failed = record && record.beats_lead_baseline === false;
    check.hidden = !failed;
    if (!failed) return;
    const scores = (s) => ["rouge1", "rouge2", "rougeL"]
      .map((k) => Number(s[k]).toFixed(2)).join(" / ");
    check.textContent = "Not trained enough: on validation this model does not " +
      `beat the ${record.baseline} baseline (the document's first words): ` +
      `ROUGE-1/2/L ${scores(record.model)} against ${scores(record.lead_baseline)}.`;
  }

  async function generate() {
    const text = article.value.trim();
    if (!text) {
      setStatus("Paste an article first.", true);
      article.focus();
      return;
    }
    button.disabled = true;
    form.setAttribute("aria-busy", "true");
    setStatus("Generating\u2026");
    const started = performance.now();
    try {
      const response = await fetch("/api/headline", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(
          maxLength() === null ? { document: text }
            : { document: text, max_length: maxLength() }),
      });
      let data;
      try {
        data = await response.json();
      } catch (e) {
        throw new Error(`server answered ${response.status} without JSON`);
      }
      if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
      headline.textContent = data.headline || "(empty headline)";
      const ms = Math.round(performance.now() - started);
      const score = typeof data.score === "number" ? data.score.toFixed(3) : "n/a";
      meta.textContent = `score ${score} \u00b7 ${ms} ms`;
      modelInfo.textContent = `model ${data.model_name} \u00b7 version ${data.model_version}`;
      showCheck(data.validation_check);
      renderHeatmap(data.source_tokens || [], data.headline_tokens || [],
                    data.source_words || [], data.headline_words || [],
                    data.attention || []);
      result.hidden = false;
      setStatus("Done.");
    } catch (err) {
      setStatus(`Error: ${err.message}`, true);
    } finally {
      button.disabled = false;
      form.removeAttribute("aria-busy");
    }
  }

  maxWords.addEventListener("input", showMaxWords);
  showMaxWords();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    generate();
  });
  article.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      generate();
    }
  });
})();
