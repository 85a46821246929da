/**
 * The request side of OpenAI's Chat Completions dialect: messages (image parts, assistant tool
 * calls, tool results), tools, tool choice and the sampling options, as an OpenAI-compatible
 * server expects them. Ollama's native API takes the same `tools` entries.
 */
import type { GenerationOptions, ProviderMessage, ResponseFormat, ToolChoice, ToolDefinition } from './types.js';

/** One message in OpenAI's shape. */
export function openAiMessage(message: ProviderMessage): Record<string, unknown> {
  switch (message.role) {
    case 'system':
      return { role: 'system', content: message.content };
    case 'user':
      if (!message.images || message.images.length === 0) return { role: 'user', content: message.content };
      return {
        role: 'user',
        content: [
          ...(message.content ? [{ type: 'text', text: message.content }] : []),
          ...message.images.map((image) => ({
            type: 'image_url',
            image_url: { url: image.url, ...(image.detail ? { detail: image.detail } : {}) },
          })),
        ],
      };
    case 'assistant':
      if (!message.toolCalls || message.toolCalls.length === 0) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: message.content.length > 0 ? message.content : null,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.name, arguments: call.arguments },
        })),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  }
}

/** Tool definitions as OpenAI's `tools` array (Ollama reads the same shape). */
export function openAiTools(tools: readonly ToolDefinition[]): Array<Record<string, unknown>> {
  return tools.map((tool) => ({
    type: 'function',
    function: {
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      ...(tool.parameters !== undefined ? { parameters: tool.parameters } : {}),
      ...(tool.strict !== undefined ? { strict: tool.strict } : {}),
    },
  }));
}

function openAiToolChoice(choice: ToolChoice): unknown {
  return typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } };
}

function openAiResponseFormat(format: ResponseFormat): Record<string, unknown> {
  if (format.type !== 'json_schema') return { type: format.type };
  return {
    type: 'json_schema',
    json_schema: {
      name: format.name,
      ...(format.schema !== undefined ? { schema: format.schema } : {}),
      ...(format.strict !== undefined ? { strict: format.strict } : {}),
    },
  };
}

/** Adds the /v1-only options to an OpenAI request body. */
export function addOpenAiOptions(body: Record<string, unknown>, options: GenerationOptions | undefined): void {
  if (!options) return;
  if (options.topP !== undefined) body.top_p = options.topP;
  if (options.stop !== undefined) body.stop = options.stop;
  if (options.seed !== undefined) body.seed = options.seed;
  if (options.user !== undefined) body.user = options.user;
  if (options.responseFormat) body.response_format = openAiResponseFormat(options.responseFormat);
  if (options.reasoningEffort !== undefined) body.reasoning_effort = options.reasoningEffort;
  if (options.tools && options.tools.length > 0) {
    body.tools = openAiTools(options.tools);
    if (options.toolChoice !== undefined) body.tool_choice = openAiToolChoice(options.toolChoice);
    if (options.parallelToolCalls !== undefined) body.parallel_tool_calls = options.parallelToolCalls;
  }
}
