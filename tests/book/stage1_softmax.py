# The chapter's code (section 3.3), each listing pasted into the stage's function as a learner would.
import torch


def attention_scores(inputs, query):
    attn_scores_2 = torch.empty(inputs.shape[0])
    for i, x_i in enumerate(inputs):
        attn_scores_2[i] = torch.dot(x_i, query)  # dot product (transpose not necessary here since they are 1-dim vectors)
    return attn_scores_2


def softmax_naive(x):
    return torch.exp(x) / torch.exp(x).sum(dim=0)


def context_vector(inputs, attn_weights):
    context_vec_2 = torch.zeros(inputs[0].shape)
    for i, x_i in enumerate(inputs):
        context_vec_2 += attn_weights[i] * x_i
    return context_vec_2


def simple_self_attention(inputs):
    attn_scores = inputs @ inputs.T
    attn_weights = torch.softmax(attn_scores, dim=-1)
    all_context_vecs = attn_weights @ inputs
    return all_context_vecs
