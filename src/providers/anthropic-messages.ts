/**
 * The request side of Anthropic's Messages dialect for the OpenAI-shaped conversation: images
 * become `image` blocks, assistant tool calls `tool_use` blocks, tool results `tool_result` blocks
 * in a user turn (consecutive turns of one role merged, as the API wants them alternating), and
 * tools, tool choice and stop sequences their Anthropic equivalents.
 */
import { argumentsObject } from './tool-arguments.js';
import type { GenerationOptions, ImageInput, ProviderMessage, ToolChoice } from './types.js';

type Block = Record<string, unknown>;
interface AnthropicMessage {
  role: 'user' | 'assistant';
  content: string | Block[];
}

const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

function imageBlock(image: ImageInput): Block {
  const data = DATA_URL.exec(image.url);
  if (data) return { type: 'image', source: { type: 'base64', media_type: data[1], data: data[2] } };
  return { type: 'image', source: { type: 'url', url: image.url } };
}

function blocksOf(message: Exclude<ProviderMessage, { role: 'system' }>): AnthropicMessage {
  switch (message.role) {
    case 'user':
      if (!message.images || message.images.length === 0) return { role: 'user', content: message.content };
      return {
        role: 'user',
        content: [...message.images.map(imageBlock), ...(message.content ? [{ type: 'text', text: message.content }] : [])],
      };
    case 'assistant':
      if (!message.toolCalls || message.toolCalls.length === 0) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: [
          ...(message.content ? [{ type: 'text', text: message.content }] : []),
          ...message.toolCalls.map((call) => ({ type: 'tool_use', id: call.id, name: call.name, input: argumentsObject(call.arguments) })),
        ],
      };
    case 'tool':
      return { role: 'user', content: [{ type: 'tool_result', tool_use_id: message.toolCallId, content: message.content }] };
  }
}

function asBlocks(content: string | Block[]): Block[] {
  return typeof content === 'string' ? (content ? [{ type: 'text', text: content }] : []) : content;
}

/** The conversation (system messages already folded out) as Anthropic messages. */
export function anthropicMessages(messages: ReadonlyArray<ProviderMessage>): AnthropicMessage[] {
  const merged: AnthropicMessage[] = [];
  for (const message of messages) {
    if (message.role === 'system') continue;
    const next = blocksOf(message);
    const previous = merged.at(-1);
    if (previous && previous.role === next.role) {
      previous.content = [...asBlocks(previous.content), ...asBlocks(next.content)];
    } else {
      merged.push(next);
    }
  }
  return merged;
}

function anthropicToolChoice(choice: ToolChoice | undefined, parallel: boolean | undefined): Record<string, unknown> | undefined {
  let translated: Record<string, unknown> | undefined;
  if (choice === 'auto') translated = { type: 'auto' };
  else if (choice === 'required') translated = { type: 'any' };
  else if (choice === 'none') translated = { type: 'none' };
  else if (choice !== undefined) translated = { type: 'tool', name: choice.name };
  if (parallel === false && choice !== 'none') translated = { type: 'auto', ...translated, disable_parallel_tool_use: true };
  return translated;
}

/** Adds the /v1-only options Anthropic has (tools, tool choice, stop sequences, top_p, user) to a body. */
export function addAnthropicOptions(body: Record<string, unknown>, options: GenerationOptions | undefined): void {
  if (!options) return;
  if (options.topP !== undefined && body.thinking === undefined) body.top_p = options.topP;
  if (options.stop !== undefined) body.stop_sequences = options.stop;
  if (options.user !== undefined) body.metadata = { user_id: options.user };
  if (options.tools && options.tools.length > 0) {
    body.tools = options.tools.map((tool) => ({
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      input_schema: tool.parameters ?? { type: 'object', properties: {} },
    }));
    const choice = anthropicToolChoice(options.toolChoice, options.parallelToolCalls);
    if (choice) body.tool_choice = choice;
  }
}
