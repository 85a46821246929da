/** Reading server-sent event frames from a fetch() response, for the resumable-stream suites. */

export interface Frame {
  id: string | undefined;
  event: string;
  data: any;
}

/** Reads SSE frames until `stop` says so (or the end); cancels the rest (the socket drops). */
export async function readUntil(response: Response, stop: (frames: Frame[]) => boolean = () => false): Promise<Frame[]> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const frames: Frame[] = [];
  while (!stop(frames)) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
      const text = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = /^data: (.*)$/m.exec(text)?.[1];
      if (data === undefined) continue;
      frames.push({ id: /^id: (.*)$/m.exec(text)?.[1], event: /^event: (.*)$/m.exec(text)?.[1] ?? 'message', data: JSON.parse(data) });
      if (stop(frames)) break;
    }
  }
  await reader.cancel();
  return frames;
}
