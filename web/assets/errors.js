// API errors as sentences about the form's fields (issue 29). The API keeps its codes and its
// messages, which name request fields the way a program does ("field 'extra_nvme_tb' must be a
// whole number", "amount must be a positive decimal string with at most 2 decimals, such as
// \"100.00\" (not a number)"); a person reads the field's own label instead ("Extra NVMe must be a
// whole number."), an example instead of "decimal string", and no parser detail. The error's
// code and field stay on the ApiError for the code that decides where to show it.

// The label a person sees for the control named `name` in `form` (its <label> without the
// "(optional …)" note, else its fieldset's legend), or null.
export function fieldLabel(form, name) {
  if (!form || !name) return null;
  const control = form.querySelector(`[name="${CSS.escape(name)}"]`);
  if (!control) return null;
  let text = '';
  const label = control.id ? form.querySelector(`label[for="${CSS.escape(control.id)}"]`) : null;
  if (label) {
    const copy = label.cloneNode(true);
    for (const note of copy.querySelectorAll('.muted, .visually-hidden')) note.remove();
    text = copy.textContent;
  } else {
    const legend = control.closest('fieldset')?.querySelector('legend');
    if (legend) text = legend.textContent;
  }
  // A note in parentheses goes ("(optional, businesses)", "(tokens)"); a unit stays ("Size (TB)").
  text = text.replace(/\s+/g, ' ').replace(/\s*\((?![A-Z]{2,4}\))[^)]*\)\s*$/, '').trim();
  return text || null;
}

const REWRITES = [
  // "a positive decimal string with at most 2 decimals, such as "100.00"" -> an amount with an example.
  [/must be a (?:positive )?decimal string(?: of [^,]*?)? with at most (\d+) decimals?, such as "([^"]+)"/, (m, n, ex) => `must be a number such as ${ex}, with at most ${n} decimals`],
  [/must be a (?:positive )?decimal string/, () => 'must be a number such as 100.00'],
  [/must be a whole number\b(?:, got .*)?/, () => 'must be a whole number'],
  [/must be a string\b/, () => 'must be text'],
];

function humanName(name) {
  const s = String(name).replace(/_/g, ' ');
  return s.charAt(0).toUpperCase() + s.slice(1);
}

// The sentence shown for `error` ({field, message}) in `form`.
export function errorSentence(error, form) {
  let message = String((error && error.message) || '').trim();
  if (!message) return 'Something went wrong; try again.';
  let rewritten = false;
  for (const [pattern, fix] of REWRITES) {
    if (pattern.test(message)) {
      message = message.replace(pattern, fix);
      rewritten = true;
    }
  }
  // A rewritten rule says what is wanted; the parser's own detail after it goes ("(not a number)").
  if (rewritten) message = message.replace(/\s*\([^()]*\)\s*$/, '');
  // The field named at the start ("field 'x' must", "x must", "--x-y must" as the CLI spells it)
  // becomes its label.
  const lead = /^(?:field '([a-z][a-z0-9_.]*)'|--([a-z][a-z0-9-]*)|([a-z][a-z0-9_.]*))(?=[ :])/.exec(message);
  const name = lead ? lead[1] || (lead[2] && lead[2].replace(/-/g, '_')) || lead[3] : null;
  const isField = name && (lead[1] || lead[2] || name === error.field || /_/.test(name) || (form && form.querySelector(`[name="${CSS.escape(name)}"]`)));
  if (isField) {
    const label = fieldLabel(form, name) || fieldLabel(form, error.field) || humanName(name);
    message = label + message.slice(lead[0].length);
  }
  // Any other field of the form named inside the sentence ("… larger than min_gpus") by its label.
  if (form) {
    message = message.replace(/\b[a-z]+(?:_[a-z0-9]+)+\b/g, (word) => {
      const label = fieldLabel(form, word);
      return label ? label.toLowerCase() : word;
    });
  }
  // Counts with separators, as everywhere else ("10000000 tokens" -> "10,000,000 tokens"); not
  // inside quotes (what the person typed) nor in dates, addresses or versions.
  message = message.replace(/(^|[\s(])(\d{5,})(?=[\s,.;:)]|$)/g, (m, pre, digits) => pre + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ','));
  // "vCPUs must ..." keeps its spelling; any other sentence starts with a capital.
  if (!/^[a-z][A-Z]/.test(message)) message = message.charAt(0).toUpperCase() + message.slice(1);
  if (!/[.!?]$/.test(message)) message += '.';
  return message;
}
