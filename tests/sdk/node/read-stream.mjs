// Feeds a recorded UI message chunk stream to the real AI SDK's readUIMessageStream.
//
// Input (stdin, or the file named by the last argument): one chunk per line, as JSON, or as
// SSE lines ("data: {...}", "data: [DONE]", blank lines). The lines go through the SDK's own
// parseJsonEventStream + uiMessageChunkSchema, the path DefaultChatTransport takes, so a chunk
// the SDK would reject is reported, not silently folded.
//
// Options:
//   --split            one readUIMessageStream per `start` chunk (a stream of several messages,
//                      as PAI's websocket and `pai_chat --jsonl` send them)
//   --message=FILE     a UIMessage (JSON) to continue, as useChat continues the last assistant
//                      message after an approval or a client tool output
//
// Output (stdout, one JSON object):
//   {"messages": [UIMessage...], "snapshots": N, "invalid": [{"index", "error"}],
//    "errors": [string...], "valid": bool (validateUIMessages on the result)}
import { readFileSync } from "node:fs";
import {
  parseJsonEventStream,
  readUIMessageStream,
  safeValidateUIMessages,
  uiMessageChunkSchema,
} from "ai";

const args = process.argv.slice(2);
const split = args.includes("--split");
const messageArg = args.find((a) => a.startsWith("--message="));
const fileArg = args.filter((a) => !a.startsWith("--")).at(-1);
const initial = messageArg ? JSON.parse(readFileSync(messageArg.slice(10), "utf8")) : undefined;
const text = readFileSync(fileArg ?? 0, "utf8");

function short(error) {
  return String(error?.message ?? error).slice(0, 400);
}

function toSse(source) {
  const out = [];
  for (const raw of source.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    out.push(line.startsWith("data:") ? line : `data: ${line}`);
  }
  return out.map((l) => `${l}\n\n`).join("");
}

async function parseChunks(source) {
  const bytes = new TextEncoder().encode(toSse(source));
  const stream = parseJsonEventStream({
    stream: new ReadableStream({
      start(c) {
        c.enqueue(bytes);
        c.close();
      },
    }),
    schema: uiMessageChunkSchema,
  });
  const chunks = [];
  const invalid = [];
  let index = 0;
  for await (const result of stream) {
    if (result.success) chunks.push(result.value);
    else invalid.push({ index, error: short(result.error) });
    index += 1;
  }
  return { chunks, invalid };
}

function segments(chunks) {
  if (!split) return [chunks];
  const groups = [];
  for (const chunk of chunks) {
    if (chunk.type === "start" || groups.length === 0) groups.push([]);
    groups.at(-1).push(chunk);
  }
  return groups;
}

async function fold(chunks, message, errors) {
  const stream = new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
  let last;
  let snapshots = 0;
  for await (const snapshot of readUIMessageStream({
    message,
    stream,
    onError: (e) => errors.push(short(e)),
  })) {
    last = snapshot;
    snapshots += 1;
  }
  return { message: last ?? message, snapshots };
}

const { chunks, invalid } = await parseChunks(text);
const errors = [];
const messages = [];
let snapshots = 0;
let first = true;
for (const group of segments(chunks)) {
  const folded = await fold(group, first ? initial : undefined, errors);
  first = false;
  snapshots += folded.snapshots;
  if (folded.message !== undefined) messages.push(folded.message);
}
const validation = messages.length
  ? await safeValidateUIMessages({ messages })
  : { success: true };
process.stdout.write(
  JSON.stringify({
    messages,
    snapshots,
    invalid,
    errors,
    valid: validation.success,
    validationError: validation.success ? null : short(validation.error),
  }) + "\n",
);
