// Recorded outcomes in MCP terms (README, "Recorded outcomes"): the bytes
// every adapter records for the answer it sent, the answer a retry gets
// from them, and how states.fetch finds the answer in a response, JSON or
// an event stream, without holding it up, and sends another in its place.

/**
 * The JSON-RPC error a retry gets when the answer to its state is not
 * recorded yet (the sealer's IN_PROGRESS: the first request's handler
 * still runs): retry later, never start over. Its data.reason is
 * "in_progress".
 */
export const IN_PROGRESS_ERROR = Object.freeze({
  code: -32603,
  message: "Request still in progress: retry later",
  data: Object.freeze({ reason: "in_progress" }),
});

/**
 * The JSON-RPC error a retry gets when the state it carries was consumed
 * by an open whose inputResponses were other than the retry's (the
 * sealer's OUTCOME_CONFLICT: seat "1A" where the round ran with "12A"):
 * -32602, as for any refused state, with data.reason "outcome_conflict",
 * so that the client tells it from other refusals. The answer recorded
 * for the state is never sent for it, and the handler does not run: the
 * client starts over. As the Go adapter's gosdk.OutcomeConflict.
 */
export const OUTCOME_CONFLICT_ERROR = Object.freeze({
  code: -32602,
  message: "invalid requestState: answered before for other inputResponses",
  data: Object.freeze({ reason: "outcome_conflict" }),
});

/** The outcome recorded when no answer went out: retries of its state are then refused at once. */
export const NO_ANSWER = new Uint8Array(0);

/** The most of an event stream read to find the answer: an answer longer than the sealer keeps (1 MiB at most) is not recorded anyway. */
const MAX_SCANNED = 2 << 20;

/**
 * The outcome the codec records for a JSON-RPC response: the UTF-8 JSON of
 * the response without jsonrpc and id, {"result":...} or {"error":...}, as
 * every adapter records it (README, "Recorded outcomes").
 */
export function outcomeOf(response: { result?: unknown; error?: unknown }): Uint8Array {
  const answer = Object.hasOwn(response, "error") ? { error: response.error } : { result: response.result };
  return new TextEncoder().encode(JSON.stringify(answer));
}

/**
 * The JSON-RPC response that answers request id with a recorded outcome:
 * its bytes as recorded, after jsonrpc and id. undefined when the outcome
 * is not {"result": object} or {"error": {code, message...}}.
 */
export function answerOf(outcome: Uint8Array, id: string | number): string | undefined {
  let text: string;
  let v: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(outcome).trim();
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
  if (!isObject(v)) return undefined;
  const keys = Object.keys(v);
  if (keys.length !== 1) return undefined;
  if (keys[0] === "result") {
    if (!isObject(v.result)) return undefined;
  } else if (keys[0] === "error") {
    const e = v.error;
    if (!isObject(e) || !Number.isInteger(e.code) || typeof e.message !== "string") return undefined;
  } else {
    return undefined;
  }
  // text is an object with one member: "{" then that member, as recorded.
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},${text.slice(1)}`;
}

/** A JSON-RPC message (or its text) as an HTTP 200 JSON answer, as the SDK answers a handler. */
export function jsonResponse(body: unknown): Response {
  return new Response(typeof body === "string" ? body : JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } });
}

/** The JSON-RPC response to id in a JSON body or an event stream's data, or undefined. */
function responseIn(json: string, id: unknown): { result?: unknown; error?: unknown } | undefined {
  let m: unknown;
  try {
    m = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof m !== "object" || m === null || Array.isArray(m)) return undefined;
  const r = m as { id?: unknown; result?: unknown; error?: unknown };
  if (r.id !== id || !(Object.hasOwn(r, "result") || Object.hasOwn(r, "error"))) return undefined;
  return r;
}

/**
 * Hands response on and gives onAnswer the outcome of the answer to id in
 * it (NO_ANSWER when it holds none) as that answer passes: at once for a
 * JSON body; for an event stream, when its event comes (the SDK may send
 * the stream before the answer is decided), the events before it passed
 * on as each is complete, those after it as they come. A JSON-RPC message
 * (text) that onAnswer returns goes out in place of the answer.
 */
export async function answerThrough(response: Response, id: unknown, onAnswer: (outcome: Uint8Array) => string | undefined): Promise<Response> {
  const type = response.headers.get("content-type") ?? "";
  if (response.body === null || !(type.startsWith("application/json") || type.startsWith("text/event-stream"))) {
    onAnswer(NO_ANSWER);
    return response;
  }
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  if (type.startsWith("application/json")) {
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      onAnswer(NO_ANSWER);
      throw err;
    }
    const r = responseIn(text, id);
    const instead = onAnswer(r === undefined ? NO_ANSWER : outcomeOf(r));
    return instead === undefined ? new Response(text, init) : jsonResponse(instead);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  let done = false;
  const finish = (outcome: Uint8Array): string | undefined => {
    if (done) return undefined;
    done = true;
    return onAnswer(outcome);
  };
  // An event as it goes out: the answer's data replaced by what onAnswer returns.
  const eventOut = (event: string): string => {
    const lines = event.split(/\r?\n/);
    const data = lines
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(l.startsWith("data: ") ? 6 : 5))
      .join("\n");
    const r = data === "" ? undefined : responseIn(data, id);
    const instead = r === undefined ? undefined : finish(outcomeOf(r));
    if (instead === undefined) return event;
    const kept = lines.filter((l) => !l.startsWith("data:"));
    return [...kept, ...instead.split(/\r\n|\r|\n/).map((l) => `data: ${l}`)].join("\n");
  };
  // The complete events of pending as they go out; the incomplete one
  // stays, unless the answer has passed or it is too long to scan.
  const scan = (): string => {
    let out = "";
    while (!done) {
      const m = /\r?\n\r?\n/.exec(pending);
      if (m === null) break;
      out += eventOut(pending.slice(0, m.index)) + m[0];
      pending = pending.slice(m.index + m[0].length);
    }
    if (!done && pending.length > MAX_SCANNED) finish(NO_ANSWER);
    if (done) {
      out += pending;
      pending = "";
    }
    return out;
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (err) {
          finish(NO_ANSWER);
          controller.error(err);
          return;
        }
        if (chunk.done) {
          finish(NO_ANSWER);
          const rest = pending + decoder.decode();
          pending = "";
          if (rest !== "") controller.enqueue(encoder.encode(rest));
          controller.close();
          return;
        }
        pending += decoder.decode(chunk.value, { stream: true });
        const out = scan();
        if (out !== "") {
          controller.enqueue(encoder.encode(out));
          return;
        }
      }
    },
    cancel(reason) {
      finish(NO_ANSWER);
      return reader.cancel(reason);
    },
  });
  return new Response(stream, init);
}
