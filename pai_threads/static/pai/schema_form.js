// A form built from a JSON schema (a client tool's output schema, as pydantic writes it):
// the chat page answers a client tool with it. Strings, numbers, integers, booleans, enums,
// dates and nullable fields get native inputs (so the browser checks required/min/max);
// anything else (objects, arrays, unions) gets a JSON text area. `readValue` turns the
// inputs back into a typed value that matches the schema.

/** Resolve a local `$ref` (`#/$defs/Name`) against the root schema. */
function resolve(schema, root) {
  let node = schema ?? {};
  for (let depth = 0; node.$ref && depth < 16; depth++) {
    const path = String(node.$ref).replace(/^#\//, "").split("/");
    const target = path.reduce((at, key) => at?.[key], root);
    const { $ref, ...rest } = node;
    node = { ...(target ?? {}), ...rest };
  }
  return node;
}

/** A field's schema without its `null` alternative: `{schema, nullable}`. */
function unwrapNullable(schema, root) {
  const node = resolve(schema, root);
  const variants = node.anyOf ?? node.oneOf;
  if (Array.isArray(variants)) {
    const others = variants.filter((v) => resolve(v, root).type !== "null");
    if (others.length === 1 && others.length < variants.length) {
      const { anyOf, oneOf, ...rest } = node;
      return { schema: { ...resolve(others[0], root), ...rest }, nullable: true };
    }
  }
  if (Array.isArray(node.type) && node.type.includes("null")) {
    const types = node.type.filter((t) => t !== "null");
    return { schema: { ...node, type: types.length === 1 ? types[0] : types }, nullable: true };
  }
  return { schema: node, nullable: false };
}

function kindOf(schema) {
  if (Array.isArray(schema.enum) && schema.enum.length) return "enum";
  if ("const" in schema) return "const";
  const type = schema.type;
  if (type === "boolean") return "boolean";
  if (type === "integer" || type === "number") return type;
  if (type === "string") return "string";
  return "json";
}

const STRING_INPUTS = { date: "date", "date-time": "datetime-local", email: "email", uri: "url", time: "time" };

function fieldInput(name, schema, kind, required) {
  let input;
  if (kind === "enum") {
    input = document.createElement("select");
    if (!required && schema.default === undefined) input.append(new Option("—", ""));
    schema.enum.forEach((value, index) => input.append(new Option(String(value), String(index))));
  } else if (kind === "boolean") {
    input = document.createElement("input");
    input.type = "checkbox";
  } else if (kind === "integer" || kind === "number") {
    input = document.createElement("input");
    input.type = "number";
    input.step = kind === "integer" ? "1" : "any";
    const min = schema.minimum ?? (schema.exclusiveMinimum != null ? schema.exclusiveMinimum + (kind === "integer" ? 1 : 0) : undefined);
    const max = schema.maximum ?? (schema.exclusiveMaximum != null ? schema.exclusiveMaximum - (kind === "integer" ? 1 : 0) : undefined);
    if (min != null) input.min = String(min);
    if (max != null) input.max = String(max);
  } else if (kind === "string" && !(schema.maxLength > 200)) {
    input = document.createElement("input");
    input.type = STRING_INPUTS[schema.format] ?? "text";
    if (schema.minLength != null) input.minLength = schema.minLength;
    if (schema.maxLength != null) input.maxLength = schema.maxLength;
    if (schema.pattern) input.pattern = schema.pattern;
  } else {
    input = document.createElement("textarea");
    input.rows = kind === "json" ? 3 : 2;
    if (kind === "json") input.placeholder = "JSON";
    if (kind === "string" && schema.maxLength != null) input.maxLength = schema.maxLength;
  }
  input.name = name;
  input.required = required && kind !== "boolean";
  return input;
}

function setInitial(input, field, draft) {
  const { kind, schema } = field;
  const value = draft !== undefined ? draft : schema.default;
  if (value === undefined || value === null) return;
  if (kind === "boolean") input.checked = Boolean(value);
  else if (kind === "enum") {
    const index = draft !== undefined ? Number(draft) : schema.enum.indexOf(value);
    if (index >= 0) input.value = String(index);
  } else if (kind === "json" && draft === undefined) input.value = JSON.stringify(value);
  else input.value = String(value);
}

/** The fields of an object schema: `[{name, label, description, kind, schema, required, nullable}]`. */
export function schemaFields(schema) {
  const root = schema ?? {};
  const node = resolve(root, root);
  if (node.type !== "object" && !node.properties) return null;
  const required = new Set(node.required ?? []);
  return Object.entries(node.properties ?? {}).map(([name, raw]) => {
    const { schema: field, nullable } = unwrapNullable(raw, root);
    return {
      name, schema: field, nullable, required: required.has(name), kind: kindOf(field),
      label: field.title ?? name, description: field.description ?? "",
    };
  });
}

function readField(form, field) {
  const input = form.elements.namedItem(field.name);
  const { kind, schema } = field;
  if (kind === "boolean") return { value: input.checked };
  const raw = input.value;
  if (raw === "") return field.required && field.nullable ? { value: null } : {};
  if (kind === "enum") return { value: schema.enum[Number(raw)] };
  if (kind === "const") return { value: schema.const };
  if (kind === "integer") return { value: Number.parseInt(raw, 10) };
  if (kind === "number") return { value: Number(raw) };
  if (kind === "json") return { value: JSON.parse(raw) };
  return { value: raw };
}

/**
 * The typed value of the form: an object of the schema's fields (empty optional ones left
 * out), or the free answer's text when the schema is not an object. Throws a
 * `SyntaxError` naming the field whose JSON does not parse.
 */
export function readValue(form, fields) {
  if (!fields) return form.elements.namedItem("answer").value;
  const value = {};
  for (const field of fields) {
    try {
      const read = readField(form, field);
      if ("value" in read) value[field.name] = read.value;
    } catch (error) {
      throw new SyntaxError(`${field.label}: ${error.message}`);
    }
  }
  return value;
}

/** The raw input values (kept while the page re-renders, restored into a new form). */
export function readDraft(form) {
  const draft = {};
  for (const input of form.elements) {
    if (input.name) draft[input.name] = input.type === "checkbox" ? input.checked : input.value;
  }
  return draft;
}

/**
 * A `<form>` answering with a value of `schema`: `onSubmit(value)` once the browser's own
 * validation passes, `onDecline()` for "Decline". `draft` restores earlier raw input;
 * `onDraft(draft)` hears every change.
 */
export function schemaForm(schema, { onSubmit, onDecline, draft = {}, onDraft, submitLabel = "Send answer" }) {
  const form = document.createElement("form");
  form.className = "schema-form";
  const fields = schemaFields(schema);
  const uid = Math.random().toString(36).slice(2, 8);
  for (const field of fields ?? [{ name: "answer", label: "Your answer", kind: "string", schema: { maxLength: 10000 }, required: true, description: "" }]) {
    const id = `sf-${uid}-${field.name}`;
    const row = document.createElement("div");
    row.className = `schema-field kind-${field.kind}`;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = field.label;
    if (field.required && field.kind !== "boolean") label.append(Object.assign(document.createElement("span"), { className: "required", textContent: " *" }));
    const input = fieldInput(field.name, field.schema, field.kind, field.required);
    input.id = id;
    setInitial(input, field, draft[field.name]);
    if (field.description) {
      const hint = Object.assign(document.createElement("small"), { id: `${id}-hint`, textContent: field.description });
      input.setAttribute("aria-describedby", hint.id);
      row.append(...(field.kind === "boolean" ? [input, label, hint] : [label, input, hint]));
    } else row.append(...(field.kind === "boolean" ? [input, label] : [label, input]));
    form.append(row);
  }
  const error = Object.assign(document.createElement("p"), { className: "schema-error", hidden: true });
  error.setAttribute("role", "alert");
  const actions = document.createElement("div");
  actions.className = "tool-actions";
  const submit = Object.assign(document.createElement("button"), { type: "submit", className: "primary submit-answer", textContent: submitLabel });
  const decline = Object.assign(document.createElement("button"), { type: "button", className: "decline", textContent: "Decline" });
  actions.append(submit, decline);
  form.append(error, actions);
  form.oninput = form.onchange = () => onDraft?.(readDraft(form));
  form.onsubmit = (event) => {
    event.preventDefault();
    let value;
    try {
      value = readValue(form, fields);
    } catch (problem) {
      error.hidden = false;
      error.textContent = problem.message;
      return;
    }
    error.hidden = true;
    submit.disabled = decline.disabled = true;
    Promise.resolve(onSubmit(value)).catch((problem) => {
      submit.disabled = decline.disabled = false;
      error.hidden = false;
      error.textContent = String(problem?.message ?? problem);
    });
  };
  decline.onclick = () => {
    submit.disabled = decline.disabled = true;
    Promise.resolve(onDecline?.()).catch(() => { submit.disabled = decline.disabled = false; });
  };
  return form;
}
