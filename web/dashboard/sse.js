// Server-Sent Events reading for the playground: an incremental parser that follows the
// WHATWG event-stream rules (CR, LF and CRLF line ends, multi-line data, comments, chunks split
// anywhere), and a reader that feeds it from a fetch() response body as bytes arrive.

/**
 * Creates a parser; `feed(text)` takes any slice of the stream and calls `onEvent({event, data})`
 * for every complete event. Comments (`: ping`) and fields other than event/data are ignored.
 */
export function createSseParser(onEvent) {
  let pending = '';
  let eventName = '';
  let dataLines = [];
  // The last event id persists across events, as the standard says (a resume sends it back).
  let lastId = '';

  function takeLine(line) {
    if (line === '') {
      if (dataLines.length > 0) onEvent({ event: eventName || 'message', data: dataLines.join('\n'), id: lastId });
      eventName = '';
      dataLines = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') eventName = value;
    else if (field === 'data') dataLines.push(value);
    else if (field === 'id' && !value.includes('\0')) lastId = value;
  }

  return {
    feed(text) {
      pending += text;
      let start = 0;
      for (let index = 0; index < pending.length; index += 1) {
        const char = pending[index];
        if (char !== '\n' && char !== '\r') continue;
        // A CR at the very end may be the first half of a CRLF split across chunks: wait for more.
        if (char === '\r' && index === pending.length - 1) break;
        takeLine(pending.slice(start, index));
        if (char === '\r' && pending[index + 1] === '\n') index += 1;
        start = index + 1;
      }
      pending = pending.slice(start);
    },
  };
}

/**
 * Reads a text/event-stream response body to its end, calling `onEvent({event, data})` as each
 * event completes (as the standard says, an event cut off before its blank line is dropped).
 * Rejects with an AbortError when the request's signal fires.
 */
export async function readSseStream(response, onEvent) {
  const parser = createSseParser(onEvent);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(value);
    }
  } finally {
    reader.releaseLock();
  }
}
