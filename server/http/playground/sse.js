// HTTP helpers of the playground: the bearer token header, the server's error messages, and
// server-sent events read from a POST (EventSource can neither POST nor send a token).

// An error the server answered with: its HTTP status and its own message.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function requestHeaders(token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

// The server's message from an error response ({"error": {"message": ...}}), else the status.
export async function apiError(response) {
  const text = await response.text();
  let message = `HTTP ${response.status}`;
  try {
    const body = JSON.parse(text);
    if (body && body.error && body.error.message) message = body.error.message;
  } catch {
    if (text.trim()) message = `HTTP ${response.status}: ${text.trim()}`;
  }
  return new ApiError(response.status, message);
}

export async function getJson(path, token) {
  const response = await fetch(path, { headers: requestHeaders(token) });
  if (!response.ok) throw await apiError(response);
  return response.json();
}

// POSTs `body` and yields each event's data (a string), in order. Throws ApiError when the
// server refuses the request; `signal` aborts the stream (the server then cancels it).
export async function* postEvents(path, body, token, signal) {
  const response = await fetch(path, {
    method: "POST",
    headers: requestHeaders(token),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await apiError(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data) yield data;
    }
  }
}
